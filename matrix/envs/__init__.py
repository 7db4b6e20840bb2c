"""Running things: the one env runner (build, link, clean, run in an env) and the tools it drives (uv, git)."""
