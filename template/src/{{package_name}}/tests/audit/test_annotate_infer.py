"""``propose``: hand-made records of two runs with other sizes, and small sources. Names come
from the code, then ``batch``, then ``<param>_axis<i>``; axes share a name only where their
sizes agreed in every call; what never varied is literal. The last tests run what it writes
under jaxtyping + beartype: new sizes pass, planted boundary bugs raise."""

import textwrap

import jaxtyping
import pytest
import torch
from beartype import beartype
from jaxtyping import TypeCheckError, jaxtyped
from torch import Tensor

from ...audit.annotate.infer import Proposal, propose

FILE = "/work/model.py"


def t(*shape: int, dtype: str = "float32") -> dict:
    return {"tensor": list(shape), "dtype": dtype}


def call(result: dict | None = None, caller: dict | None = None, **args: dict) -> dict:
    done = result is not None
    return {"args": args, "result": result, "complete": done, "caller": caller, "count": 1}


def run(source: str, **functions: list[dict]) -> tuple[dict, Proposal]:
    """Propose for ``functions`` (qualname -> calls), whose parameters the source names."""
    record = {"format": "annotate-record", "version": 1, "runs": 2, "functions": {}}
    for qualname, calls in functions.items():
        params = list(dict.fromkeys(name for seen in calls for name in seen["args"]))
        entry = {"file": FILE, "qualname": qualname, "params": params, "calls": calls}
        record["functions"][f"{FILE}::{qualname}"] = {**entry, "torchscript": False}
    proposal = propose(record, {FILE: textwrap.dedent(source)})
    found = {key.split("::")[1]: (f.params, f.result) for key, f in proposal.functions.items()}
    return found, proposal


def test_code_names_axes_and_a_caller_takes_them_from_its_callee() -> None:
    source = """
        class Attention:
            def forward(self, x):
                B, T, C = x.size()
                return x
        def block(x, mask):
            return x
        def norm(y):
            return y
    """
    sizes = [(4, 16), (8, 24)]
    by_block = [{"function": f"{FILE}::block", "args": {"x": t(b, n, 32)}} for b, n in sizes]
    inner = [
        call(t(b, n, 32), by, x=t(b, n, 32)) for (b, n), by in zip(sizes, by_block, strict=True)
    ]
    outer = [call(t(b, n, 32), x=t(b, n, 32), mask=t(n, n, dtype="bool")) for b, n in sizes]
    norm = [
        call(t(b, n, 32), by, y=t(b, n, 32)) for (b, n), by in zip(sizes, by_block, strict=True)
    ]
    found, proposal = run(source, **{"Attention.forward": inner, "block": outer, "norm": norm})
    assert found["Attention.forward"] == ({"x": 'Float[Tensor, "B T C"]'}, 'Float[Tensor, "B T C"]')
    # C never varied: named where the code names it, literal where a name would only spread
    assert found["block"][0] == {"x": 'Float[Tensor, "B T 32"]', "mask": 'Bool[Tensor, "T T"]'}
    assert found["norm"] == ({"y": 'Float[Tensor, "B T 32"]'}, 'Float[Tensor, "B T 32"]')
    assert "model.py::Attention.forward x: axis 1 'T' (x.size())" in proposal.named_from_code


def test_shape_index_einops_and_len_name_axes_but_a_composite_axis_is_no_name() -> None:
    source = """
        def f(img, x, y, d, _e, m, v):
            width = img.shape[-1]
            *_, cols = v.shape
            torch.einsum("ij,jk->ik", m, m)
            n = len(y)
            q = rearrange(x, "b t (h d) -> b h t d", h=2)
            x = x + 1
            late = x.shape[2]
            D1 = d.shape[0]
            _b = _e.shape[0]
    """
    calls = [
        call(
            img=t(b, 3, w),
            x=t(b, w, 2 * w),
            y=t(w + 1),
            d=t(w + 2),
            _e=t(w + 3),
            m=t(w + 4, w + 5),
            v=t(b, w + 6),
        )
        for b, w in [(2, 8), (5, 6)]
    ]
    found, _ = run(source, f=calls)
    assert found["f"][0] == {
        "img": 'Float[Tensor, "b 3 width"]', "x": 'Float[Tensor, "b width x_axis2"]',
        "y": 'Float[Tensor, " n"]', "d": 'Float[Tensor, " d_axis0"]',
        "_e": 'Float[Tensor, " e_axis0"]', "m": 'Float[Tensor, "i j"]',
        "v": 'Float[Tensor, "b cols"]',
    }  # fmt: skip


def test_a_column_and_a_vector_never_share_and_a_one_run_coincidence_splits() -> None:
    calls = [call(t(), pred=t(b, 1), target=t(b), other=t(b)) for b in (4, 8)]
    calls.append(call(t(), pred=t(6, 1), target=t(6), other=t(7)))
    found, _ = run("def loss(pred, target, other): ...", loss=calls)
    assert found["loss"] == (
        {"pred": 'Float[Tensor, "pred_axis0 1"]', "target": 'Float[Tensor, " pred_axis0"]',
         "other": 'Float[Tensor, " other_axis0"]'},
        'Float[Tensor, ""]',
    )  # fmt: skip


def test_batch_needs_every_argument_leading_and_a_varied_size() -> None:
    varied = [call(t(b, 5), x=t(b, 3), w=t(3, 5)) for b in (4, 8)]
    fixed = [call(t(4, 2), x=t(4, 2)), call(t(4, 2), x=t(4, 2))]
    found, proposal = run("def g(x, w): ...\ndef h(x): ...", g=varied, h=fixed)
    assert found["g"] == ({"x": 'Float[Tensor, "x_axis0 3"]', "w": 'Float[Tensor, "3 5"]'},
                          'Float[Tensor, "x_axis0 5"]')  # fmt: skip
    assert found["h"][0] == {"x": 'Float[Tensor, "4 2"]'}
    literal = "x axis 0 = 4, return axis 0 = 4, x axis 1 = 2, return axis 1 = 2 (never varied)"
    assert proposal.literal_axes[-1] == f"model.py::h: {literal}"


def test_an_integer_argument_names_the_axis_it_equalled_in_every_call_and_only_alone() -> None:
    def calls(names: str, *rows: tuple[int, int, dict[str, int]]) -> list[dict]:
        integers = dict.fromkeys(names.split(), {"other": "int"})
        return [{**call(t(n, 3), x=t(b, 3), **integers), "ints": ints} for b, n, ints in rows]

    found, proposal = run(
        "def f(x, n): ...\ndef g(x, n): ...\ndef h(x, n, m): ...",
        f=calls("n", (2, 4, {"n": 4}), (3, 6, {"n": 6})),
        g=calls("n", (2, 4, {"n": 4}), (3, 6, {})),  # the second call's n was no size
        h=calls("n m", (2, 4, {"n": 4, "m": 4}), (3, 6, {"n": 6, "m": 6})),  # which of the two?
    )
    x = {"x": 'Float[Tensor, "batch 3"]'}
    assert found["f"] == (x, 'Float[Tensor, "n 3"]')
    assert found["g"] == found["h"] == (x, 'Float[Tensor, "result_axis0 3"]')
    assert "model.py::f return: axis 0 'n' (= n, an argument)" in proposal.named_from_code


def test_a_code_named_axis_keeps_its_name_and_same_name_disagreeing_is_split() -> None:
    source = """
        def f(x, y):
            B, T = x.shape
            T = y.shape[0]
    """
    found, _ = run(source, f=[call(None, x=t(2, 7), y=t(t_)) for t_ in (3, 5)])
    assert found["f"][0] == {"x": 'Float[Tensor, "B T"]', "y": 'Float[Tensor, " T_y"]'}


def test_dtype_classes_without_precision() -> None:
    calls = [
        call(
            t(b, dtype=d),
            img=t(b, 3, dtype="uint8"),
            ids=t(b, dtype="int64"),
            m=t(b, dtype="bool"),
            z=t(b, dtype="complex64"),
            h=t(b, dtype=d),
            s=t(b, dtype=d),
        )
        for b, d in [(2, "bfloat16"), (3, "float32")]
    ]
    calls[1]["args"]["s"] = t(3, dtype="int32")
    found, proposal = run("def f(img, ids, m, z, h, s): ...", f=calls)
    kinds = {name: text.split("[")[0] for name, text in found["f"][0].items()}
    assert kinds == {
        "img": "UInt",
        "ids": "Int",
        "m": "Bool",
        "z": "Complex",
        "h": "Float",
        "s": "Shaped",
    }
    assert proposal.functions[f"{FILE}::f"].complete


def test_optional_tuple_and_non_tensor_parameters() -> None:
    def seen(b: int, mask: dict) -> dict:
        result = {"tuple": [t(b, 2), t(), {"other": "int"}]}
        return call(result, x=t(b, 2), mask=mask, k={"other": "int"})

    calls = [seen(3, {"none": True}), seen(5, t(5, dtype="bool")), seen(4, {"none": True})]
    found, _ = run("def f(x, mask, k): ...", f=calls)
    assert found["f"] == (
        {"x": 'Float[Tensor, "batch 2"]', "mask": 'Bool[Tensor, " batch"] | None'},
        'tuple[Float[Tensor, "batch 2"], Float[Tensor, ""], int]',
    )


def test_lists_and_a_rank_that_varied() -> None:
    calls = [
        call(t(b, 4), pair={"list": [t(b, 3, s, s, dtype="uint8"), t(b, dtype="int64")]},
             same={"list": [t(b, 4), t(b, 4)]}, x=t(b, 2, 4))
        for b, s in [(2, 8), (3, 6)]
    ]  # fmt: skip
    calls.append(call(t(5, 4), pair={"list": []}, same={"list": [t(5, 4)]}, x=t(5, 4)))
    found, _ = run("def f(pair, same, x): ...", f=calls)
    assert found["f"] == (
        {
            "pair": 'list[Shaped[Tensor, " ..."]]',  # items differ: beartype checks any one
            "same": 'list[Float[Tensor, "same_item_axis0 4"]]',
            "x": 'Float[Tensor, "... x_axis_neg2 4"]',  # no leading axis: no batch
        },
        'Float[Tensor, "same_item_axis0 4"]',
    )

    raised = [call(None, x=t(1)), call(t(), x=t())]  # a call that raised shows what f takes too
    assert run("def f(x): ...", f=raised)[0]["f"][0] == {"x": 'Float[Tensor, " ..."]'}


def test_a_function_that_never_returned_gets_no_result_and_torchscript_is_left_alone() -> None:
    record = {"functions": {
        f"{FILE}::f": {"file": FILE, "qualname": "f", "params": ["x"], "torchscript": False,
                       "calls": [call(None, x=t(2, 3)), call(None, x=t(4, 3))]},
        f"{FILE}::g": {"file": FILE, "qualname": "g", "params": ["x"], "torchscript": True,
                       "calls": [call(t(2), x=t(2))]},
        f"{FILE}::h": {"file": FILE, "qualname": "h", "params": ["x"], "torchscript": True,
                       "calls": []},  # compiled by a decorator: it never ran as Python
    }}  # fmt: skip
    proposal = propose(record, {FILE: "def f(x): ...\ndef g(x): ...\ndef h(x): ..."})
    f = proposal.functions[f"{FILE}::f"]
    assert (f.params, f.result, f.complete) == ({"x": 'Float[Tensor, "batch 3"]'}, None, False)
    assert proposal.incomplete == ["model.py::f"]
    assert proposal.torchscript == ["model.py::g", "model.py::h"]
    assert f"{FILE}::g" not in proposal.functions


def _checked(annotations: dict[str, str], result: str):
    """A function with these annotations that returns ``out``, checked as ``--decorate`` does."""
    scope = {**vars(jaxtyping), "Tensor": Tensor}
    params = ", ".join(f"{name}: {text}" for name, text in annotations.items())
    exec(f"def f(out, {params}) -> {result}:\n    return out\n", scope)  # noqa: S102
    return jaxtyped(typechecker=beartype)(scope["f"])


def test_what_it_writes_passes_new_sizes_and_refuses_planted_bugs() -> None:
    calls = [
        call(t(b, s, 1), obs=t(b, s, 4), act=t(b, s, dtype="int64")) for b, s in [(4, 16), (8, 32)]
    ]
    found, _ = run("def critic(obs, act): ...", critic=calls)
    critic = _checked(*found["critic"])

    def check(out=(3, 5, 1), obs=(3, 5, 4), act=(3, 5), dtype=torch.long) -> None:
        critic(torch.zeros(out), torch.zeros(obs), torch.zeros(act, dtype=dtype))

    check()  # batch 3 and time 5 were never recorded
    # a squeezed result, swapped axes, a column, a short batch, another dtype
    bugs = [{"out": (3, 5)}, {"obs": (5, 3, 4)}, {"act": (3, 5, 1)}, {"act": (2, 5)}]
    for bug in [*bugs, {"dtype": torch.float}]:
        with pytest.raises(TypeCheckError):
            check(**bug)
