"""The checklist: one check per rule of the recipe, one folder per layer (installed as golive.suites)."""
