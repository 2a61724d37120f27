"""After go-live: capture a site profile from a running station, and watch it."""
