#pragma once

// What the macros of lumen_bake_paths (cmake/LumenBakedPaths.cmake) call:
// the path baked in under `name`, from the target's generated table.
const char* lumen_baked_path(const char* name);
