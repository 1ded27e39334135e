package postgres

// MigrateFS lets tests apply a migration set of their own.
var MigrateFS = migrate
