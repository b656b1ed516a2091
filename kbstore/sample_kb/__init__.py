"""A small picobot-style workspace bundled for `kbstore demo` and the tests."""
