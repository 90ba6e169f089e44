// Package config loads and validates the daemon's configuration.
//
// The configuration is layered: the embedded defaults (default.yaml, which is
// also the commented reference of every key) < a YAML file < DEGRADED_*
// environment variables < command-line flags. [Load] merges the layers with
// koanf, rejects unknown keys in the file (suggesting the closest known
// key), warns about DEGRADED_* variables that name no key, decodes the
// result into a [Config] and runs [Config.Validate], which reports every
// problem at once as "key.path: what is wrong (was VALUE)". Files are read
// up to 1 MiB; tokens are never shown in a message.
//
// The package does not watch files or reload anything itself: callers that
// reload (SIGHUP, POST /-/reload) call [Load] again with
// [LoadOptions].Reload set, check the result against the socket they have
// bound with [CheckProtected], and keep the old [Config] when either fails. It does not build samplers, servers or loggers either; it
// only hands out validated values and the [levels.Table].
package config
