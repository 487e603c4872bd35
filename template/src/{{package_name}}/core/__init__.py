"""The typed core, yours to copy into other code and to extend: each file imports only torch,
jaxtyping, beartype, einops and its neighbours here."""
