package synodpb

// UserKey is the metadata key that names the user whose password
// PasswordKey carries (a user of the cluster file's users; absent or
// "default": the cluster password's default user), as Redis's AUTH user
// password (docs/SECURITY.md).
const UserKey = "synod-user"
