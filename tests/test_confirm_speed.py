"""The daemon's fast paths keep its promises: folded rate-limit keys, cached tokens, targeted wake-ups."""

from __future__ import annotations

from kindling.confirm.folding import fold_action
from kindling.confirm.policy import is_high_risk
from kindling.confirm.settings import HIGH_RISK_ACTIONS


def test_fold_action_makes_spellings_one_key() -> None:
    same = [
        "rotate_keys",
        "Rotate-Keys",
        " ROTATE  keys ",
        "ｒｏｔａｔｅ＿ｋｅｙｓ",
        "rotate.keys_",
        "_rotate__keys",
    ]
    assert {fold_action(a) for a in same} == {"rotate_keys"}
    assert fold_action("ﬁle_read") == "file_read"  # a ligature
    assert fold_action("rotate_key") != fold_action("rotate_keys")
    # The high-risk check uses the same fold: a full-width spelling is still high-risk.
    assert is_high_risk("ｒｏｔａｔｅ＿ｋｅｙｓ", HIGH_RISK_ACTIONS)
