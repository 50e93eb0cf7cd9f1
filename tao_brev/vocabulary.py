"""The words a job record holds (the TAO skill bank's format; schema in
``references/schemas/job_record.schema.json``): states, transition sources,
storage tiers, error classes.

A module of its own, with no imports, so that ``tao_job_record.py --help``
lists the choices without loading the record store (``records`` re-exports them).
"""

STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")
TERMINAL_STATES = ("COMPLETE", "ERROR", "CANCELED")
SOURCES = ("agent", "poller", "backend-hook")
STORAGE_TIERS = ("A", "B", "C")
ERR_CLASSES = ("ERR_INFRA", "ERR_PROGRAM")
