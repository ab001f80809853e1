package suppression

// LuaEpochMs is the script's time reader, for checking ParseTime against it.
const LuaEpochMs = luaEpochMs
