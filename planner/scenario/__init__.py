"""Stage 1, the scenario: its schema (msgspec types and bounds, ``schema``) and decoding
from TOML or JSON with one-line errors naming the field (``decode``), and what a scenario implies
beyond its fields (``derived``: horizon, admitted variants)."""
