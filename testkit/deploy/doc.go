// Package deploy holds the tests of the deployment files at the repository root: that
// docker-compose.yml, loaded with the compose-spec Go library as `docker compose` would load
// it, runs every service the README and docs/scaling.md promise, with its ports, health
// checks, dependencies, volumes and replicas, and that each mcpulse service's command is a
// real subcommand of the mcpulse binary with real flags. It has no non-test code.
package deploy
