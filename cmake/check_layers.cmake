# Refuses an include that points up the layers. The build runs it (target
# check_layers, part of ALL) as `cmake -DROOT=<source dir> -P` this file.
#
# The layers, lowest first, a line each. Files of a folder may include
# headers of their own layer and of lower ones. An include of a project
# header whose folder is not listed is refused too: a new folder gets its
# place here.
cmake_minimum_required(VERSION 3.25)

set(layers
  "base"
  "algorithms gateway/budget"
  "store store/redis"
  "rules"
  "gateway/telemetry"
  "gateway/io"
  "gateway/http2"
  "gateway/core"
  "gateway/serve"
  "gateway/http1 gateway/h2 gateway/decision"
  "gateway/admin"
  "gateway gateway/tools")

set(rank 0)
foreach(line IN LISTS layers)
  string(REPLACE " " ";" folders "${line}")
  foreach(folder IN LISTS folders)
    string(REPLACE "/" "_" id "${folder}")
    set(rank_${id} ${rank})
    list(APPEND listed ${folder})
  endforeach()
  math(EXPR rank "${rank} + 1")
endforeach()

# The folder of a project path ("gateway/core/x.h" -> "gateway/core"), or
# "" when it is in none of the listed ones.
function(folder_of path out)
  get_filename_component(dir "${path}" DIRECTORY)
  if(dir IN_LIST listed)
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

set(errors "")
foreach(folder IN LISTS listed)
  file(GLOB sources RELATIVE "${ROOT}" "${ROOT}/${folder}/*.h" "${ROOT}/${folder}/*.cc")
  string(REPLACE "/" "_" id "${folder}")
  set(own ${rank_${id}})
  foreach(source IN LISTS sources)
    file(STRINGS "${ROOT}/${source}" includes REGEX "^#include \"[a-z_0-9/]+\\.h\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      if(NOT EXISTS "${ROOT}/${header}")
        continue()  # generated (rls_proto/...) or not the project's
      endif()
      folder_of("${header}" target)
      if(target STREQUAL "")
        string(APPEND errors "${source}: ${header}: its folder has no layer in cmake/check_layers.cmake\n")
        continue()
      endif()
      if(target STREQUAL folder)
        continue()
      endif()
      string(REPLACE "/" "_" tid "${target}")
      if(${rank_${tid}} GREATER ${own})
        string(APPEND errors "${source}: includes ${header}: ${target} is above ${folder}\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(NOT errors STREQUAL "")
  message(FATAL_ERROR "Includes against the layers (cmake/check_layers.cmake):\n${errors}")
endif()
