# The layers of src/, lowest first, and what each may include. Run by the build before anything
# compiles (target gpuheal_layers): an include that runs upward, sideways into a layer not listed,
# or from a directory that is not a layer fails the build with the file and line.
#   cmake -DSRC=<repo>/src -P cmake/check_layers.cmake
#
#   core        types, catalogs and contracts (reasons, keys, the agent<->controller formats)
#   parse       kernel-log text: line layouts, NVIDIA and kernel parsers, the classifier
#   kube        the Kubernetes client
#   sources     device readers: /dev/kmsg, NVML, DCGM, rtnetlink, the mount table, CRI
#   bmc         out-of-band management: the Redfish client
#   slurm       the Slurm client (libslurm, opened on demand) and gpuheal's drain-reason format
#   serve       metrics registry and the HTTP endpoint
#   agent       the node agent
#   controller  the cluster controller
#   sim, drill  simulated nodes and the end-to-end drill
#   cli         the gpuheal binary's commands
cmake_minimum_required(VERSION 3.20)
set(LAYERS core parse kube sources bmc slurm serve agent controller sim drill cli)
set(ALLOW_core core)
set(ALLOW_parse core parse)
set(ALLOW_kube core kube)
set(ALLOW_sources core sources)
set(ALLOW_bmc core bmc)
set(ALLOW_slurm core slurm)
set(ALLOW_serve core serve)
set(ALLOW_agent core parse kube sources slurm serve agent)
set(ALLOW_controller core kube bmc serve controller)
set(ALLOW_sim core parse kube sources slurm serve agent sim)
set(ALLOW_drill core parse kube sources bmc slurm serve agent sim drill)
set(ALLOW_cli ${LAYERS})

if(NOT SRC)
  message(FATAL_ERROR "check_layers.cmake: pass -DSRC=<repo>/src")
endif()

set(errors "")
file(GLOB dirs LIST_DIRECTORIES true RELATIVE ${SRC} ${SRC}/*)
foreach(d ${dirs})
  if(IS_DIRECTORY ${SRC}/${d} AND NOT d IN_LIST LAYERS)
    string(APPEND errors "  src/${d}/: not a layer; add it to LAYERS in cmake/check_layers.cmake with what it may include\n")
  endif()
endforeach()

foreach(layer ${LAYERS})
  file(GLOB files ${SRC}/${layer}/*.h ${SRC}/${layer}/*.cc)
  foreach(f ${files})
    file(STRINGS ${f} lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(line MATCHES "^#include \"([a-z_]+)/")
        set(dir ${CMAKE_MATCH_1})
        if(NOT dir IN_LIST ALLOW_${layer})
          file(RELATIVE_PATH rel ${SRC}/.. ${f})
          list(JOIN ALLOW_${layer} ", " allowed)
          string(APPEND errors "  ${rel}:${n}: ${line}: layer '${layer}' may include only ${allowed}\n")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

if(errors)
  message(FATAL_ERROR "gpuheal layers: an include runs against the layering (docs/architecture.md):\n${errors}"
                      "Move the code to the layer it belongs to, or the header it needs down a layer.")
endif()
