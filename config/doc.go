// Package config loads and validates the daemon's configuration.
//
// The configuration is layered: the embedded defaults (default.yaml, which is
// also the commented reference of every key) < a YAML file < DEGRADED_*
// environment variables < command-line flags. [Load] merges the layers with
// koanf, rejects unknown keys in the file, decodes the result into a [Config]
// and runs [Config.Validate], which reports every problem at once as
// "key.path: what is wrong (was VALUE)".
//
// The package does not watch files or reload anything itself: callers that
// reload (SIGHUP, POST /-/reload) call [Load] again and keep the old [Config]
// when it fails. It does not build samplers, servers or loggers either; it
// only hands out validated values and the [levels.Table].
package config
