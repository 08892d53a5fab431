package testenv

import "strings"

// IsFerretDBBuildInfo reports whether a buildInfo command reply comes from
// FerretDB rather than MongoDB.
//
// FerretDB speaks the MongoDB wire protocol and reports a MongoDB version in
// buildInfo's "version" field, so the version alone does not tell them apart.
// FerretDB adds fields of its own: v1 replies with "ferretdbVersion" and
// "ferretdbFeatures", v2 with a "ferretdb" document. Any top-level key that
// starts with "ferretdb" therefore marks FerretDB.
//
// The function takes the decoded reply as a plain map so that this package
// needs no MongoDB driver; with mongo-driver/v2:
//
//	var info bson.M
//	err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info)
//	ferret := err == nil && testenv.IsFerretDBBuildInfo(info)
//
// Tests use it to skip what FerretDB v1 lacks (transactions, change streams,
// partial and TTL indexes, atomic findOneAndUpdate under concurrency) with that
// reason, while the same tests run against a real MongoDB from testcontainers.
func IsFerretDBBuildInfo(buildInfo map[string]any) bool {
	for k := range buildInfo {
		if strings.HasPrefix(strings.ToLower(k), "ferretdb") {
			return true
		}
	}
	return false
}
