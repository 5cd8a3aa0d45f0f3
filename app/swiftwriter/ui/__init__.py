"""The PySide6 desktop app. Nothing outside this package imports it."""
