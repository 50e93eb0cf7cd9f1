"""The verbs: preflight, submit, status (poll + logs), teardown."""
