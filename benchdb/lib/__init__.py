"""Small helpers shared by the apps (no models, no Django imports)."""
