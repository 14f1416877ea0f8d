"""The epsilon (distance similarity) join: API, plans and engines."""
