"""Repository-level pytest settings for in-repo runs. Check logic lives in suites/, machinery in golive/."""

# Station trees under fixtures/ are chroot targets, not test folders.
collect_ignore_glob = ["fixtures/*", ".venv/*", "reports/*"]
