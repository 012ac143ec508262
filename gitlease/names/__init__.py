"""How a new resource may be spelled: one spelling per name, nothing invisible in it
(docs/concepts.md, claims and resources)."""
