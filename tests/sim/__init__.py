"""Simulator of brev and docker for the tests (see README.md); entry point: simctl.Simulator."""
