-- expect: tests/gen/bad/env_config.lua:6: error: configs[1]: expected a configuration table, got the sandbox's environment (_ENV)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    _ENV,
  },
}
