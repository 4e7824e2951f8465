"""Operations: embedded defaults, the dev runner, health, deploy checks."""
