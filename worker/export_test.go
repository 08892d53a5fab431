package worker

// PresenceName is presenceName, for the external tests.
var PresenceName = presenceName
