"""The reports, every one with the same verdict: go-live.html, go-live.md, results.json, junit.xml."""
