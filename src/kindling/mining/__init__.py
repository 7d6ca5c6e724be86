"""kindling.mining: pair tool calls with results, judge outcomes, keep what worked, report failure rates.

``mine`` is pure over an iterable of sessions: no I/O of its own beyond the optional
``$KINDLING_HOME/mining.json``. ``mine_source`` reads a source itself and mines a Hermes database
in several worker processes, with the same result.
"""

from kindling.mining.config import (
    DEFAULT_OUTCOME_RULES,
    DEFAULT_PERSONAL_KEYS,
    DEFAULT_PERSONAL_PATTERNS,
    DEFAULT_SECRET_PATTERNS,
    DEFAULT_TOOL_FAMILIES,
    DEFAULT_TRIVIAL_TOOLS,
    MiningConfig,
    OutcomeRule,
    load_mining_config,
    mining_config_path,
)
from kindling.mining.model import Example, Outcome, OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier, classify_outcome
from kindling.mining.parallel import default_workers, mine_source, mine_sources
from kindling.mining.passes import truncate
from kindling.mining.patterns import (
    MiningResult,
    canonical_arguments,
    compute_stats,
    mine,
    personal_data_scrubber,
)
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.mining.stats import MiningStats, cohort_of, wilson_interval
from kindling.mining.tasktype import (
    TaskClassifier,
    TaskType,
    TextAccuracy,
    classify_calls,
    classify_task_text,
    measure_text_accuracy,
)

__all__ = [
    "DEFAULT_OUTCOME_RULES",
    "DEFAULT_PERSONAL_KEYS",
    "DEFAULT_PERSONAL_PATTERNS",
    "DEFAULT_SECRET_PATTERNS",
    "DEFAULT_TOOL_FAMILIES",
    "DEFAULT_TRIVIAL_TOOLS",
    "Example",
    "MiningConfig",
    "MiningResult",
    "MiningStats",
    "Outcome",
    "OutcomeClassifier",
    "OutcomeRule",
    "OutcomeStatus",
    "PersonalDataScrubber",
    "SecretRedactor",
    "TaskClassifier",
    "TaskType",
    "TextAccuracy",
    "canonical_arguments",
    "classify_calls",
    "classify_outcome",
    "classify_task_text",
    "cohort_of",
    "compute_stats",
    "default_workers",
    "load_mining_config",
    "measure_text_accuracy",
    "mine",
    "mine_source",
    "mine_sources",
    "mining_config_path",
    "personal_data_scrubber",
    "truncate",
    "wilson_interval",
]
