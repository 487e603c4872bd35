"""The typed core: shapes, losses, metrics, nets, policy gradient and the broadcast guard.

Yours to copy into other code and to extend. Each file imports only torch, jaxtyping,
beartype, einops and its neighbours here.
"""
