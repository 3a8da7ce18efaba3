"""The text ``nacelle --help`` ends with: the subcommands, the forms of a prompt, the
exit codes, the environment variables read and the defaults. Kept apart from
:mod:`nacelle.cli.run` because it is prose a person reads, and it grows with every
subcommand while the code that parses the line does not.

The exit codes live here too, beside the text that explains them, for
every command alike.

Imports nothing.
"""

__all__ = ["EPILOG", "EXIT_FAILED", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_OK",
           "EXIT_USAGE"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

EPILOG = """\
subcommands:
  demo                    run the offline demo (no key, no network)
  report RUN.jsonl        render a run recorded with --record as an HTML page
  sessions [list|show NAME|delete NAME]
                          the sessions saved with --session
  models [--provider P]   the models the provider lists (anthropic, openrouter, openai,
                          ollama; cached for 10 minutes)
  serve [MODULE:FACTORY]  serve the agent (or yours) over HTTP with a chat page
  batch INPUT.jsonl -o RESULTS.jsonl [--workers N]
                          run many prompts, resumably
  eval DATA.jsonl --agent MODULE:FACTORY [--repeat N] [--baseline OLD.json]
                          check an agent against cases; exits 1 when a case failed
                          or regressed (nacelle eval --help)
  resume NAME [--approve ID|all] [--deny ID|all]
                          decide the calls a --pause run left waiting, and go on
  logs [-n N] [-q TEXT] [--json] [path|status|on|off]
                          the runs kept in the log (every prompt run; --no-log skips one)
  help [COMMAND]          this help, or a subcommand's
  A prompt that is exactly a subcommand's name is typed after --: nacelle -- demo

prompts:
  nacelle "prompt"        run one prompt; the answer alone on stdout
  CMD | nacelle           stdin, when it is not a terminal, is the prompt
  CMD | nacelle "prompt"  the prompt, then the piped text as its material
  nacelle -a FILE "prompt"
                          attach an image, a PDF or a text file ('-': stdin)
  nacelle                 an interactive session (on a terminal; /help inside)

backends (--backend NAME; the key is read from the environment, never from settings):
  anthropic      Claude (ANTHROPIC_API_KEY; the default, with its default model)
  openai         OpenAI's Responses API (OPENAI_API_KEY)
  gemini         Gemini's native API (GEMINI_API_KEY)
  openrouter     OpenRouter (OPENROUTER_API_KEY)
  vertex         Claude on Vertex AI (Google credentials, CLOUD_ML_REGION,
                 ANTHROPIC_VERTEX_PROJECT_ID)
  bedrock        Claude on Bedrock (AWS_BEARER_TOKEN_BEDROCK or AWS keys, AWS_REGION)
  chat           any Chat Completions server at --base-url (OPENAI_API_KEY if set)
  openai-chat, gemini-chat
                 OpenAI's and Gemini's Chat Completions endpoints
  ollama, vllm, llamacpp, lmstudio
                 local servers (no key; fewer tools by default, see --tools)
  groq, deepseek, mistral, together, xai
                 hosted Chat Completions services (GROQ_API_KEY, DEEPSEEK_API_KEY, …)
  --base-url URL points any of them elsewhere: nacelle --backend ollama --model qwen3
  --base-url http://gpu-box:11434/v1 "hello"

exit codes:
  0    a complete answer
  1    a failure (the reason on one line of stderr)
  2    a usage error
  3    an incomplete answer (max tokens, iteration cap, budget, refusal, pause, no
       valid --schema value), or a call refused because no terminal could ask
       (stdin piped and no /dev/tty: --yes approves, or run on a terminal)
  130  interrupted (Ctrl-C)

environment:
  ANTHROPIC_API_KEY, OPENAI_API_KEY, …     the backends' keys (never in settings)
  ANTHROPIC_BASE_URL, OPENROUTER_BASE_URL   point a backend elsewhere (a proxy)
  NACELLE_BACKEND, NACELLE_MODEL, NACELLE_BASE_URL, NACELLE_ROOT, NACELLE_BASH,
  NACELLE_MAX_ITERATIONS, NACELLE_EFFORT, NACELLE_SHOW_THINKING, NACELLE_SEARCH_URL,
  NACELLE_TOOLS, NACELLE_SESSIONS_DIR       settings (flag > environment > profile >
                                            file)
  NACELLE_PROFILE     the settings file's profiles.NAME to use (like --profile)
  NACELLE_CONFIG      the settings file (default ~/.nacelle.yml)
  XDG_DATA_HOME       sessions, history and logs.db under $XDG_DATA_HOME/nacelle
                      (default ~/.local/share/nacelle)
  XDG_CACHE_HOME      the models cache under $XDG_CACHE_HOME/nacelle (default ~/.cache)
  XDG_CONFIG_HOME     your own AGENTS.md / CLAUDE.md in $XDG_CONFIG_HOME/nacelle (default
                      ~/.config/nacelle), read before the project's (--no-instructions)
  OPENAI_API_KEY, OPENAI_BASE_URL, OLLAMA_HOST   for 'nacelle models'
  NO_COLOR            no colour

defaults: backend anthropic (its default model), root ., max iterations 50, no bash,
no web tools, every file tool (read_file and list_directory on a local server);
write, command and web tools ask y/n/always/never before they run.
"""
