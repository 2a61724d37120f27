"""One golive run under pytest: the plugin's hooks and fixtures, scope, outcomes, progress, estimate, scheduling."""
