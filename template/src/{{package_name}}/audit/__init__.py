"""Audit code you did not write (docs/audit.md); nothing else imports it, so it costs nothing."""
