"""The endpoint layer (marker `endpoint`): the served OpenAI API, directly or through a gateway."""
