"""Speed and memory figures for benchdb (``python -m bench``)."""
