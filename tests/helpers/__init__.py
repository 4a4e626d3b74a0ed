"""Scaffolding shared by the tests: projects, scripted models, the fake provider, Chromium."""
