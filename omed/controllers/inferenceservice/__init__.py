"""omed."""
