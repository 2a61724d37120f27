"""The served API, reached through its OpenAI-compatible endpoint. Import the module you need; this package imports
nothing itself, so loading a profile never pays for the HTTP clients.

target       EndpointTarget: one station's URL, key, CA and timeouts, built once per station; VllmName: vLLM's own
             name for the model clients ask for (a gateway may rename it)
client       EndpointClient: chat (streamed or not, normalised), /health, /metrics, /tokenize
errors       EndpointError: a sick endpoint as one operator line (transport vs answer)
stream       the chat stream reader: every value checked, anything a server sends ends as a result or one error
timed_http   the load generator's HTTP/1.1 lanes, timed at byte arrival
load         the load generator: concurrency levels, request timelines, the sweep (docs/metrics.md)
levels       LevelResult: one level's row of the sweep, the typed hand-off to the gates and the reports
underload    probes with known answers sent while load runs
toolcalls    the tool-call battery (batteries/*.yaml) and its judge
agent        the multi-turn agent battery
answers      site answer batteries: YAML, scoring rules, floors
battery_runs repeated battery runs and their spread
longctx      long-context prompts: filler, needles, calibrated lengths
tls          which certificates a station's endpoint is trusted with; what a TLS failure says, and who acts
"""
