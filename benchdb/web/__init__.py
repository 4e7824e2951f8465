"""The server-rendered pages: no models of its own."""
