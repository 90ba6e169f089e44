// Package openapi checks api/openapi.yaml against the real server: every
// endpoint, happy paths and each kind of error, validated with
// kin-openapi. It holds tests only; it lives in the test module so that
// the daemon's module does not require kin-openapi.
package openapi
