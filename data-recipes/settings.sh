# Sourced by the recipes that resume (a finished run's output is not made again): the runs an OUTDIR holds
# must have been made with this call's settings, or they would be reported as this call's results.
# settings_stamp OUTDIR NAME=VALUE...: the first call records the settings in OUTDIR/settings; a later call
# with other values is refused (exit 2), naming what differs.
settings_stamp() {
  local dir=$1; shift
  local now; now=$(printf '%s\n' "$@")
  if [[ -s $dir/settings ]]; then
    [[ $(cat "$dir/settings") == "$now" ]] && return 0
    {
      echo "$(basename "$0"): $dir holds runs made with other settings (its finished runs would be reused):"
      { diff <(cat "$dir/settings") <(echo "$now") || true; } | sed -n 's/^< /  made with: /p; s/^> /  now:       /p'
      echo "  give another OUTDIR, or remove $dir to make them again"
    } >&2
    exit 2
  fi
  printf '%s\n' "$@" > "$dir/settings"
}
