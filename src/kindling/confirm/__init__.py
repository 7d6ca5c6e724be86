"""kindling.confirm: an agent asks, a human decides; durable, authenticated, audited.

The FastAPI app (``kindling.confirm.app.create_app``) is not imported here, so that clients and
the CLI stay fast to start.
"""

from kindling.confirm.client import ConfirmClient, Decision
from kindling.confirm.settings import HIGH_RISK_ACTIONS, ConfirmSettings
from kindling.confirm.store import AuditReport, Confirmation, ConfirmationStore, open_store

__all__ = [
    "HIGH_RISK_ACTIONS",
    "AuditReport",
    "ConfirmClient",
    "ConfirmSettings",
    "Confirmation",
    "ConfirmationStore",
    "Decision",
    "open_store",
]
