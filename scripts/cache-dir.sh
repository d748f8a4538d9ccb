# Lathe's cache folders for the scripts (sourced, not run): the shell side of lathe_cache_dir()
# (engine/model/model_loader.h), so that every script finds what another one fetched.
#   . "$(dirname "$0")/cache-dir.sh"; DIR=$(lathe_cache_dir LATHE_MODEL_DIR models)

# lathe_cache_dir VAR SUB: $VAR when it is set and not empty, else $XDG_CACHE_HOME/lathe/SUB, else
# ~/.cache/lathe/SUB.
lathe_cache_dir() {
  local override=${!1:-}
  if [ -n "$override" ]; then echo "$override"
  elif [ -n "${XDG_CACHE_HOME:-}" ]; then echo "$XDG_CACHE_HOME/lathe/$2"
  else echo "$HOME/.cache/lathe/$2"; fi
}
