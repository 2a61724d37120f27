"""The verdict words and secrets-free printing that every other part of golive speaks; imports nothing of golive."""
