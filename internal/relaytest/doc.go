// Package relaytest holds the tests of relay.Relay against real servers:
// PostgreSQL to Redis, MongoDB, RabbitMQ and MySQL and back. They live
// apart from the root package so that its test binary links no driver (the
// root tests check the hint fila.Open gives for a driver that is not
// imported).
package relaytest
