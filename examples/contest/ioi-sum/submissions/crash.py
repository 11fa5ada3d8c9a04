n = int(input())
raise SystemExit(f"crashed on purpose ({n} values)") if n else None
