"""Differential privacy: accounting (:mod:`.accountants`, :mod:`.moments`) and mechanisms."""
