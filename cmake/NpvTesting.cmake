# npv_add_check_test(NAME name LABELS l... SOURCES f.c... [LIBS t...] [ENV K=V...] [TIMEOUT s])
# One Check suite = one executable = one ctest test, labelled with its area.
pkg_check_modules(CHECK REQUIRED IMPORTED_TARGET check)

function(npv_add_check_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "LABELS;SOURCES;LIBS;ENV" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_compile_options(${T_NAME} PRIVATE ${NPV_WARNINGS})
  target_link_libraries(${T_NAME} PRIVATE npuvfio_internal PkgConfig::CHECK ${T_LIBS})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  # CK_FORK=yes: a crashing test case fails alone; Check's default timeout is ours to set.
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "CK_DEFAULT_TIMEOUT=${T_TIMEOUT};${T_ENV}"
                       SKIP_RETURN_CODE 77)
endfunction()
