# Where Lathe's shared libraries go. liblathe_engine.so (the engine, no CUDA) and the CUDA backend
# plugin liblathe_cuda.so are private libraries:
#   build tree  <build>/lib/                 both, side by side (the plugin loader looks next to
#                                            liblathe_engine.so); executables find the engine
#                                            through CMake's build RPATH
#   installed   <prefix>/<libdir>/lathe/     both; executables carry the RUNPATH
#                                            $ORIGIN/../<libdir>/lathe (e.g. /usr/bin ->
#                                            /usr/lib/lathe in the .deb)
# Install components: "lathe" (everything by default) and "cuda" (the plugin; packaging/).
include(GNUInstallDirs)
set(LATHE_LIBRARY_OUTPUT_DIR ${PROJECT_BINARY_DIR}/lib)
set(LATHE_INSTALL_PRIVATE_LIBDIR ${CMAKE_INSTALL_LIBDIR}/lathe)
file(RELATIVE_PATH LATHE_PRIVATE_LIBDIR_FROM_BIN /prefix/${CMAKE_INSTALL_BINDIR}
     /prefix/${LATHE_INSTALL_PRIVATE_LIBDIR})
set(CMAKE_INSTALL_RPATH "$ORIGIN/${LATHE_PRIVATE_LIBDIR_FROM_BIN}")
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME lathe)
