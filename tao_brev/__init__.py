"""tao-run-on-brev: run NVIDIA TAO Toolkit containers on NVIDIA Brev GPU instances.

Modules (see ARCHITECTURE.md): errors, cli, bank, redact, records, sidecar,
transport, remote, docker_state, storage, credentials, verbs.
"""

__version__ = "0.1.0"
