"""A run's replies read back: each request's text by the written rule."""

from __future__ import annotations

import itertools

import polars as pl

from batchbench.engine.replies import REPLY_TEXT


def test_a_replys_text_is_its_content_else_its_body_else_its_error():
    """The rule as `show` and the report have always read it, written plainly: the
    content when there is one (even empty), else a non-empty body, else a non-empty
    error, else "" — over every mix of missing, empty and present fields."""
    combos = list(itertools.product([None, "", "c"], [None, "", "b"], [None, "", "e"]))
    columns = ("content", "body_text", "error_message")
    frame = pl.DataFrame(
        {name: [combo[i] for combo in combos] for i, name in enumerate(columns)},
        schema={name: pl.String for name in columns},
    )
    want = [c if c is not None else (b or e or "") for c, b, e in combos]
    assert frame.select(REPLY_TEXT)["text"].to_list() == want
